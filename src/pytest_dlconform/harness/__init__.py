"""The harness: processes, ports, clusters and servers that the suites run their checks in.

- :mod:`.ports`: free loopback ports, leased (the one way a port is picked);
- :mod:`.processes`: what is alive (/proc), so nothing outlives a launcher;
- :mod:`.rank` and :mod:`.groups`: local multi-process groups with deadlines;
- :mod:`.clusters`: clusters this process already belongs to (TF_CONFIG, torchrun);
- :mod:`.pool`: groups kept alive across tests;
- :mod:`.netns`: private network namespaces with only loopback, and listeners;
- :mod:`.serving`: servers (TorchServe on loopback, TF Serving availability).

This package imports nothing when it loads: a rank's first statement imports
:mod:`.netns` and must join its namespace before anything starts a thread.
"""
