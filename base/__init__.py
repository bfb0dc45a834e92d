"""What every app shares (DESIGN.md section 3). Imports no app."""
