"""The command groups of `signoff`, one module each.

Each module has ``add_parser(commands)``, which adds its subcommand(s) to the
top-level subparsers and sets, per subcommand, either ``run`` (an async
``(settings, args) -> exit code``, given settings read from the environment)
or ``call`` (a plain ``(args) -> exit code`` that reads settings itself).
`bot.cli.COMMANDS` lists the modules in the order `signoff --help` shows them.
"""
