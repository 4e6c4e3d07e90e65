"""ActorQ: quantized actors for distributed reinforcement learning, and the QuaRL quantization study toolkit."""

__version__ = "0.1.0"
