# The lease rows keep their data: TickLock, which held every lease, is called what it holds.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0019_audit_indexes"),
    ]

    operations = [
        migrations.RenameModel(old_name="TickLock", new_name="Lease"),
    ]
