"""Tests of the QuaRL study toolkit."""
