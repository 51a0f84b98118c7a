"""The consumer side: one reference's stack, from the stub's channel down to the provider call."""
