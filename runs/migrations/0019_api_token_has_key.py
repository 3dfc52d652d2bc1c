from django.conf import settings
from django.db import migrations, models


def delete_keyless_tokens(apps, schema_editor):
    # Saved by the admin's old add form: no key hashes to "", so they never
    # authenticated anyone.
    apps.get_model("runs", "ApiToken").objects.filter(key_hash="").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0018_worker_heartbeats"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(delete_keyless_tokens, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="apitoken",
            constraint=models.CheckConstraint(condition=~models.Q(key_hash=""), name="api_token_has_key"),
        ),
    ]
