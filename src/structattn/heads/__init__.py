"""Output heads that turn encoder states into structures: the span label scorer and the chart (CKY) decoder."""
