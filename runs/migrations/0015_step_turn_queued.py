from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0014_unsent_tasks_and_start_requeued"),
    ]

    operations = [
        migrations.AddField(
            model_name="step",
            name="turn_queued",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
