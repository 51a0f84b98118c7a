"""``python -m dubbo_py.admin``: the ``dubbo-py`` CLI."""

from dubbo_py.admin.cli import main

main()
