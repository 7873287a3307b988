from django.apps import AppConfig


class TelescopeUiConfig(AppConfig):
    name = "telescope_ui"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings

        settings.DATA_DIR.mkdir(parents=True, exist_ok=True)
