"""pinpoint"""
