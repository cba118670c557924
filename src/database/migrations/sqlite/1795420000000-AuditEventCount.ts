import { MigrationInterface, QueryRunner } from 'typeorm';

/** Refused logins are tallied: one audit row stands for `count` calls (1 for every other row). */
export class AuditEventCount1795420000000 implements MigrationInterface {
  name = 'AuditEventCount1795420000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "audit_events" ADD COLUMN "count" integer NOT NULL DEFAULT (1)`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "audit_events" DROP COLUMN "count"`);
  }
}
