"""dubbo-py rpc."""
