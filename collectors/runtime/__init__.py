"""The C runtimes' side of the Python front end: run directory, launch, wire decoders."""
