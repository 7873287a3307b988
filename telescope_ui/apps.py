from django.apps import AppConfig


class TelescopeUiConfig(AppConfig):
    name = "telescope_ui"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings
        from django.db.backends.signals import connection_created

        from telescope_ui import private

        settings.DATA_DIR.mkdir(mode=private.PRIVATE_DIR, parents=True, exist_ok=True)
        connection_created.connect(private.on_connection_created,
                                   dispatch_uid="telescope_ui.private")
