"""The actor policy networks, as the TF learner trains them and as the torch actors run them.

Three modules, split by framework so that each process imports only what it needs (TensorFlow and torch together
cost ~1 GB and seconds of start-up; a learner never needs torch and an actor never needs TensorFlow):

* ``tf_nets`` (TensorFlow/Sonnet/Acme, never torch): Acme's D4PG policy and critic and the DQN Q-network, built
  with stable variable names.
* ``torch_nets`` (torch, never TensorFlow): ``D4PGPolicy`` and ``QNetwork``, which compute exactly the TF
  functions, and ``Int8Linear``, the int8 linear layer of the quantized actors.
* ``mapping`` (numpy only): the explicit TF-variable-name -> torch-state-dict-key table, with transposes and
  shape checks; ``torch_state_shapes`` says what an actor expects on the wire.

Import the submodule you need (``from actorq.networks import mapping``); this package imports nothing eagerly.
"""
