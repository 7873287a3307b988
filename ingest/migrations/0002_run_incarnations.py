from django.db import migrations, models
from django.db.models import F
import django.db.models.deletion


def wire_names(apps, schema_editor):
    Run = apps.get_model("ingest", "Run")
    Run.objects.update(wire_name=F("name"), started=True)
    StepState = apps.get_model("ingest", "StepState")
    StepState.objects.filter(dirty=False).update(done_version=F("version"))


class Migration(migrations.Migration):
    dependencies = [("ingest", "0001_initial")]

    operations = [
        migrations.AddField("run", "wire_name", models.CharField(default="", max_length=200),
                            preserve_default=False),
        migrations.AddField("run", "started", models.BooleanField(default=False)),
        migrations.AddField("stepstate", "done_version", models.BigIntegerField(default=0)),
        migrations.RunPython(wire_names, migrations.RunPython.noop),
        migrations.AddIndex("run", models.Index(fields=["project", "wire_name", "id"],
                                                name="run_wire_name")),
        migrations.CreateModel(
            name="RunIncarnation",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("uid", models.CharField(max_length=200)),
                ("project", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                              to="ingest.project")),
                ("run", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                          related_name="incarnations", to="ingest.run")),
            ],
            options={"constraints": [models.UniqueConstraint(fields=("project", "uid"),
                                                             name="incarnation_unique_uid")]},
        ),
    ]
