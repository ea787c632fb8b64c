"""mmpi-bench: each benchmark natively and across the zipper, side by side (see ``cli``)."""
