/**
 * The rule sets of the built-in roles, as stored by the RoleRulesKeyOwners migrations. `admin` may do
 * everything (the authorizer also knows it by name); `viewer` reads every resource except the ones
 * a `*` never covers (`secrets`, `metrics`).
 */
export const BUILT_IN_RULES = {
  admin: [{ clusters: ['*'], namespaces: ['*'], resources: ['*', 'secrets', 'metrics'], verbs: ['*'] }],
  viewer: [{ clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['get', 'list', 'watch', 'log'] }],
};

/** The user who owns the keys that existed before keys had owners: the first admin. */
export const FIRST_ADMIN = `(SELECT MIN(ur."user_id") FROM "user_roles" ur INNER JOIN "roles" r ON r."id" = ur."role_id" WHERE r."name" = 'admin')`;
