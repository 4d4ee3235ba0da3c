"""What a button does: decisions (first wins), the action journal, runbooks, diagnosis."""
