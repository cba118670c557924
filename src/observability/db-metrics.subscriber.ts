import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, type AfterQueryEvent, type EntitySubscriberInterface } from 'typeorm';
import { recordDbQuery } from './service-metrics.js';

/** Times every database query (TypeORM reports each one's execution time to its subscribers). */
@Injectable()
export class DbMetricsSubscriber implements EntitySubscriberInterface, OnModuleInit {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  onModuleInit(): void {
    if (!this.dataSource.subscribers.includes(this)) this.dataSource.subscribers.push(this);
  }

  afterQuery(event: AfterQueryEvent): void {
    recordDbQuery(event.query, event.success, event.executionTime ?? 0);
  }
}
