"""What the algorithms' policy networks share, as the TF learner trains them and as the torch actors run them.

Each algorithm's own networks (TF networks, torch policy) live in its package under ``actorq/algorithms/``. Three
modules here, split by framework so that each process imports only what it needs (TensorFlow and torch together
cost ~1 GB and seconds of start-up; a learner never needs torch and an actor never needs TensorFlow):

* ``tf_nets`` (TensorFlow/Sonnet, never torch): creating a policy's variables and reading them by name.
* ``torch_nets`` (torch, never TensorFlow): layer widths, Sonnet's LayerNorm epsilon, and ``Int8Linear``, the
  int8 linear layer of the quantized actors.
* ``mapping`` (numpy only): the explicit TF-variable-name -> torch-state-dict-key table, with transposes and
  shape checks; ``torch_state_shapes`` says what an actor expects on the wire.

Import the submodule you need (``from actorq.networks import mapping``); this package imports nothing eagerly.
"""
