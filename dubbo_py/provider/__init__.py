"""The provider side: declaring services, serving them, dispatch, limits and reflection."""
