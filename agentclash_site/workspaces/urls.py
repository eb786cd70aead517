from django.contrib.auth import views as auth_views
from django.urls import path

from agentclash_site.workspaces import views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("workspaces/switch/", views.workspace_switch, name="workspace-switch"),
    path("workspaces/<slug:slug>/members/", views.member_list, name="workspace-members"),
    path("workspaces/<slug:slug>/members/role/", views.member_role, name="workspace-member-role"),
    path("workspaces/<slug:slug>/members/remove/", views.member_remove, name="workspace-member-remove"),
    path("workspaces/<slug:slug>/members/leave/", views.member_leave, name="workspace-leave"),
    path("account/tokens/", views.token_list, name="token-list"),
    path("account/tokens/new/", views.token_new, name="token-new"),
    path("account/tokens/<uuid:token_id>/revoke/", views.token_revoke_view, name="token-revoke"),
]
