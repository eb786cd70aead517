from django.urls import path

from grading import views

urlpatterns = [
    path("workspaces/<slug:slug>/judge/", views.judge_provider_settings, name="judge-provider"),
]
