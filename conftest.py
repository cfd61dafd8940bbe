# This repository's own pytest set-up: load the kit's plug-in.  Installed
# copies load the same module through the pytest11 entry point of that name,
# and pytest registers a module only once.
pytest_plugins = ["conformance.plugin"]
