"""Append-only, hash-chained, keyed audit trail (DESIGN.md section 9)."""
