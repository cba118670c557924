import { MigrationInterface, QueryRunner } from 'typeorm';

/** Terminal sessions: the facts of a session's start and end rows, and the recording of its output. */
export class AuditSessionDetail1795430000000 implements MigrationInterface {
  name = 'AuditSessionDetail1795430000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "audit_events" ADD COLUMN "detail" text`);
    await queryRunner.query(`ALTER TABLE "audit_events" ADD COLUMN "recording" text`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "audit_events" DROP COLUMN "recording"`);
    await queryRunner.query(`ALTER TABLE "audit_events" DROP COLUMN "detail"`);
  }
}
