"""The web console (``dubbo-py console``): the CLI's views and operations in a browser."""
