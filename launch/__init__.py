"""Rendering a launch: shell-safe quoting, env, argv, ray start lines and the launch script."""
