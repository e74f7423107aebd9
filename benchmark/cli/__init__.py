"""The command line: ``main`` builds the parser and maps errors to exit codes; one module per
command, named as the command and found by scanning this package (a module that defines
``add_parser`` is a command; its ``ORDER`` is its place in ``dmlbench --help``); ``options``
holds the options several commands share. Nothing below this package imports it.
"""
