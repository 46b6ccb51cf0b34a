# Shared pytest configuration for the wraptext tests.
#
# The acceptance tests for this exercise live next to the starting code in the task
# package, at ../../tests/test_wrap_accept.py relative to this file
# (task layout: repo/tests/conftest.py and tests/test_wrap_accept.py).
