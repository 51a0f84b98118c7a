"""Test helpers shared by the test suite."""
