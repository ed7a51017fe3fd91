"""Continual learners on a frozen pre-trained backbone."""
