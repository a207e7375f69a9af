"""The cookiecutter templates of ``owrl new``, one folder per kind of plugin.

Installed with owrl as the ``owrl_templates`` package (package data), so ``owrl new``
finds them in a wheel install too; each folder also renders with cookiecutter's own
command: ``cookiecutter templates/tool``.
"""
