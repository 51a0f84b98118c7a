"""The ``nacos://`` store (Nacos 2.x/3.x through nacos-sdk-python)."""
