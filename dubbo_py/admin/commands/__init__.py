"""The `dubbo-py` command groups, one module each (`rules`, `services`, `route`, ...)."""
