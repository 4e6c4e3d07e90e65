"""QuaRL study toolkit: how quantization affects RL policies (stable-baselines3 on PyTorch).

Modules: ``zoo`` (train/load SB3 policies), ``envs`` (env construction, deterministic evaluation), ``ptq``
(post-training quantization sweeps), ``qat`` (quantization-aware training), ``weights`` (weight distributions
and quantization error), ``mixed_precision`` (fp32 vs bf16/fp16 DQN training), ``deploy`` (fp32 vs int8
deployment benchmark), ``report`` (markdown report of all outputs), ``cli`` (the ``actorq`` subcommands).
"""
