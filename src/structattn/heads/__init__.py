"""Output heads that turn encoder states into answers and structures: span-QA decoding (best span, null score,
no-answer threshold) and the chart parser's span label scorer and CKY decoder."""
