"""Tenancy: teams, memberships, API tokens and the scoping every tenant-owned query goes through."""
