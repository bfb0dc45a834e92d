"""`FieldErrors`: problems a user caused, one message per field, shown as such by API and pages."""


class FieldErrors(ValueError):
    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors
