"""The command line: ``main`` builds the parser and maps errors to exit codes; one module per
command (``run``, ``report``, ``list``, ``validate``, ``search``, ``sweep``, ``check``,
``cache``, ``data``); ``options`` holds the options several commands share. Nothing below this
package imports it.
"""
