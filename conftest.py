"""Repository-wide pytest configuration.

The plugin itself is loaded through its ``pytest11`` entry point once the package is installed
(``make install``); nothing here re-registers it. The plugin's own tests drive pytest through
``pytester``, which must be enabled from the top-level conftest.
"""

pytest_plugins = ["pytester"]
