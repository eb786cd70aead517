import os

from django.core.wsgi import get_wsgi_application

from agentclash_site.lib.env import load_settings_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentclash_site.settings")
load_settings_or_exit()  # a malformed setting: one line naming it, exit 2 (3 under gunicorn)
application = get_wsgi_application()
