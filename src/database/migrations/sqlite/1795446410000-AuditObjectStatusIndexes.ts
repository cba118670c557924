import { MigrationInterface, QueryRunner } from 'typeorm';

/** The audit log filtered by object (one object's history) and by status, newest first. */
export class AuditObjectStatusIndexes1795446410000 implements MigrationInterface {
  name = 'AuditObjectStatusIndexes1795446410000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX "idx_audit_events_object" ON "audit_events" ("cluster", "resource", "namespace", "name", "at") `,
    );
    await queryRunner.query(`CREATE INDEX "idx_audit_events_status" ON "audit_events" ("status_code", "at") `);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "idx_audit_events_status"`);
    await queryRunner.query(`DROP INDEX "idx_audit_events_object"`);
  }
}
