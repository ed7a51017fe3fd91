"""Tables and figures from run metrics."""
