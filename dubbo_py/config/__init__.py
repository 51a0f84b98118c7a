"""dubbo-py config."""
