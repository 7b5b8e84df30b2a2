"""From runs to job scripts: shell quoting, templates, the job command, the launch line."""
