"""Privacy mechanisms and accounting (paper 000 Sec. 3-4, App. B-C; DESIGN §4-5)."""
