"""Presentation: the HTML report (data, then view), terminal tables and plots. Renders; computes nothing new."""
