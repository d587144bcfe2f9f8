"""Tests of the compose stack, the chart and the image."""
